// Package effectstest is the test kit of the deploy body: a fake node answering from recorded systemd state, and a recording Reporter.
package effectstest
