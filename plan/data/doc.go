// Package data is switchyard's JSON data model: the values a deployment definition, a
// DEPLOYMENT submission and a plan.json hold. A value is nil, bool, string, json.Number,
// []any, map[string]any, or RepoPath (a file of the operator tree, written in JSON as
// {"_repoPath": "<relative path>"}). Anything else (a function, a derivation, a string
// with store context) is not data and is refused.
package data
