// A module only so `go mod download` has somewhere to run: fetch.sh
// downloads the report CRDs' modules by version into the module cache.
module winadmit.io/tests/report_crds

go 1.26
