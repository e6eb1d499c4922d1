// Package method is the registry of deployment methods (ssh, tf, tf-incus,
// tf-incus-operator): for each, the transport that reaches its nodes, its typed settings
// (the keys of its DEPLOYMENT branch besides applications, domain and email, and of
// deployment-method.<method> in the deployment definition) and the environment
// coordinates its plans read.
package method
