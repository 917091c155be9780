module github.com/skiprange/skiprange

go 1.26.8

require (
	github.com/google/btree v1.1.3
	go.uber.org/zap v1.28.0
	google.golang.org/protobuf v1.36.12
	pgregory.net/rapid v1.3.0
)

require go.uber.org/multierr v1.10.0 // indirect
