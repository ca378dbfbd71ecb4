#!/usr/bin/env python3
"""Writes the lint throughput set: FILES files of PER manifests each
(Deployments, DaemonSets, Pods and Services; most Windows workloads with
findings), into DIR. Usage: benches/lint_corpus.py DIR [FILES] [PER]

Then: time target/release/winadmit lint DIR > /dev/null
(WINADMIT_LINT_THREADS=1 for one core).

The one-file memory benchmark (docs/BENCHMARKS.md) uses one 10 MB file:
benches/lint_corpus.py /tmp/lint10 1 24400
(/tmp/lint10/m0000.yaml, 10,006,991 bytes, 24,400 manifests, 51,850
findings), then for each FORMAT in text json sarif junit:
/usr/bin/time -f '%e s %U user %M KB' target/release/winadmit lint --format FORMAT /tmp/lint10 > /dev/null"""
import os
import sys

out = sys.argv[1]
files = int(sys.argv[2]) if len(sys.argv) > 2 else 200
per = int(sys.argv[3]) if len(sys.argv) > 3 else 100
os.makedirs(out, exist_ok=True)

WINDOWS = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-{i}
  namespace: shop
  labels: {{app: web-{i}}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web-{i}}}
  template:
    metadata:
      labels: {{app: web-{i}}}
    spec:
      nodeSelector:
        kubernetes.io/os: windows
      hostNetwork: {host}
      containers:
      - name: iis
        image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
        securityContext:
          privileged: true
          runAsUser: 1000
        resources:
          limits: {{memory: 800Mi, cpu: "1"}}
          requests: {{memory: 400Mi}}
        volumeMounts:
        - {{name: cfg, mountPath: 'C:\\\\cfg\\\\a', subPath: a}}
        - {{name: cfg, mountPath: 'C:\\\\cfg\\\\b', subPath: b}}
      volumes:
      - name: cfg
        configMap: {{name: web-{i}}}
"""
LINUX = """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent-{i}
  namespace: ops
spec:
  selector:
    matchLabels: {{app: agent-{i}}}
  template:
    metadata:
      labels: {{app: agent-{i}}}
    spec:
      nodeSelector:
        kubernetes.io/os: linux
      hostNetwork: true
      containers:
      - name: agent
        image: busybox:1.36
        securityContext: {{privileged: true}}
"""
POD = """apiVersion: v1
kind: Pod
metadata:
  name: tool-{i}
  namespace: ops
spec:
  os: {{name: windows}}
  containers:
  - name: tool
    image: mcr.microsoft.com/windows/nanoserver:ltsc2022
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {{drop: [ALL]}}
"""
SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: web-{i}
  namespace: shop
spec:
  selector: {{app: web-{i}}}
  ports: [{{port: 80}}]
"""
n = 0
for f in range(files):
    docs = []
    for k in range(per):
        i = f * per + k
        kind = k % 4
        if kind == 0:
            docs.append(WINDOWS.format(i=i, host="true" if i % 8 == 0 else "false"))
        elif kind == 1:
            docs.append(LINUX.format(i=i))
        elif kind == 2:
            docs.append(POD.format(i=i))
        else:
            docs.append(SERVICE.format(i=i))
        n += 1
    with open(os.path.join(out, f"m{f:04d}.yaml"), "w") as fh:
        fh.write("---\n".join(docs))
print(f"{n} manifests in {files} files under {out}")
