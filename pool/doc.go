// Package pool runs work on a bounded number of goroutines.
package pool
