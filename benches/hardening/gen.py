import json, sys
n = int(sys.argv[1]); out = sys.argv[2]; variant = sys.argv[3] if len(sys.argv) > 3 else "os"
cs = [{"name": f"c{i}", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
       "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["ALL"]}}}
      for i in range(n)]
spec = {"containers": cs}
if variant == "os": spec["os"] = {"name": "windows"}
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "default"}, "spec": spec}
rev = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
       "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                   "resource": {"group": "", "version": "v1", "resource": "pods"},
                   "namespace": "default", "operation": "CREATE", "userInfo": {"username": "x"}, "object": pod}}
json.dump(rev, open(out, "w"))
