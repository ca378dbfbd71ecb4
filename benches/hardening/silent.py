import socket, ssl, sys, threading, time
mode, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain("silent.crt", "silent.key")
srv = socket.create_server(("127.0.0.1", port))
def serve(c):
    try:
        t = ctx.wrap_socket(c, server_side=True)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = t.recv(4096)
            if not b: return
            buf += b
        if mode != "silent":
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
        if mode == "trickle":
            t.sendall(b"{")
            while True:
                time.sleep(1); t.sendall(b" ")
        time.sleep(3600)
    except Exception: pass
while True:
    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
