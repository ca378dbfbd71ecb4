import socket, ssl, subprocess, sys, time, os, tempfile
binary, port = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp(dir=".")
p = subprocess.Popen([binary, "serve", "--self-signed", "--self-signed-dir", d, "--listen", f"127.0.0.1:{port}",
                      "--max-connections", "16", "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.5)
ctx = ssl.create_default_context(cafile=f"{d}/ca.pem")
ctx.set_alpn_protocols(["h2", "http/1.1"])
crowd = []
for i in range(16):
    s = socket.create_connection(("127.0.0.1", port))
    crowd.append(ctx.wrap_socket(s, server_hostname="localhost"))  # handshake, then silence
t0 = time.time()
r = subprocess.run(["curl", "-s", "--max-time", "30", "--cacert", f"{d}/ca.pem", f"https://localhost:{port}/healthz",
                    "-o", "/dev/null", "-w", "%{http_code}"], capture_output=True, text=True)
print(f"new client with 16 idle TLS connections at --max-connections 16: HTTP {r.stdout or '000'} after {time.time()-t0:.2f} s")
closed = 0
for s in crowd:
    s.setblocking(False)
    try:
        if s.recv(1) == b"": closed += 1
    except ssl.SSLWantReadError: pass
    except Exception: closed += 1
print(f"idle connections closed by then: {closed}")
p.terminate(); p.wait()
