// A module only so `go mod download` has somewhere to run: fetch.sh
// downloads the charts' modules by version into the module cache.
module winadmit.io/tests/charts

go 1.26
