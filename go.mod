module github.com/switchyard-nix/switchyard

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/kevinburke/ssh_config v1.6.0
	golang.org/x/crypto v0.59.0
)

require golang.org/x/sys v0.50.0 // indirect
