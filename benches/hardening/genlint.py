import sys
n = int(sys.argv[1])
doc = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%d
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector:
        kubernetes.io/os: windows
      containers:
      - name: iis
        image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
        securityContext:
          privileged: true
"""
with open(sys.argv[2], "w") as f:
    f.write("---\n".join(doc % i for i in range(n)))
