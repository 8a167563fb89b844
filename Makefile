# The whole test suite: static checks, then every test with the race detector.
.PHONY: test check bench run
GO ?= go

test: check
	$(GO) test -race -count=1 -timeout 20m ./...

check:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./internal/store/...

run:
	$(GO) run ./cmd/rota server
