module github.com/rotahq/rota

go 1.26.8
