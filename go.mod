module github.com/switchyard-nix/switchyard

go 1.26
