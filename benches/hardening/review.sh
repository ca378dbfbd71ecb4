#!/bin/bash
# usage: review.sh BIN PORT
BIN=$1; PORT=$2; D=$(mktemp -d)
$BIN serve --self-signed --self-signed-dir $D --listen 127.0.0.1:$PORT --worker-threads 1 --log-level warn > $D/log 2>&1 &
P=$!; sleep 1.5
rss() { grep VmRSS /proc/$P/status | awk '{print $2/1024 " MB"}'; }
echo "idle RSS: $(rss)"
for n in 1000 4000 16000; do for ep in validate mutate; do
  curl -s --cacert $D/ca.pem -H 'Content-Type: application/json' --data-binary @rev$n.json https://localhost:$PORT/$ep -o $D/out -w "$n $ep: %{http_code} %{time_total}s $(stat -c %s rev$n.json) bytes in, %{size_download} bytes out\n"
done; done
echo "RSS after: $(rss)"; sleep 5; echo "RSS 5 s later: $(rss)"; sleep 10; echo "RSS 15 s later: $(rss)"
# healthz while a 16,000-container /mutate runs (one I/O worker thread)
curl -s --cacert $D/ca.pem -H 'Content-Type: application/json' --data-binary @rev16000.json https://localhost:$PORT/mutate -o /dev/null -w "mutate during probe: %{time_total}s\n" &
sleep 0.3
curl -s --cacert $D/ca.pem https://localhost:$PORT/healthz -o /dev/null -w "healthz during mutate: %{http_code} %{time_total}s\n"
wait %2 2>/dev/null; sleep 1
# SIGTERM during a review, --shutdown-timeout 1s
kill $P; wait $P 2>/dev/null
$BIN serve --self-signed --self-signed-dir $D --listen 127.0.0.1:$PORT --worker-threads 1 --shutdown-timeout 1s --request-timeout 60s --log-level warn > $D/log 2>&1 &
P=$!; sleep 1.5
for i in 1 2 3 4; do curl -s --cacert $D/ca.pem -H 'Content-Type: application/json' --data-binary @rev16000.json https://localhost:$PORT/mutate -o /dev/null & done
sleep 0.5; T0=$(date +%s.%N); kill -TERM $P; wait $P; T1=$(date +%s.%N)
echo "SIGTERM with 4 reviews in flight, --shutdown-timeout 1s: exited after $(echo "$T1 - $T0" | bc) s"
wait
rm -rf $D
