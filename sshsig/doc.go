// Package sshsig signs and verifies OpenSSH signatures (ssh-keygen -Y) and reads allowed_signers files.
package sshsig
