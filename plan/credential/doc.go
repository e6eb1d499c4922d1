// Package credential confines the credential files a submission names (SPEC 6.9): a
// regular file of the deployer's user, unreadable by group and others, whose real path
// lies under a credential directory.
package credential
