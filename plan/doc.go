// Package plan turns an operator tree and a DEPLOYMENT submission into per-node plans (SPEC 6).
package plan
