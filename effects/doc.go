// Package effects is the deploy body: the ordered phase table of SPEC 4.1, the verdict-only pass, the eval cache and the method registry.
package effects
