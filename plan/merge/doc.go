// Package merge merges a DEPLOYMENT submission into the baked deployment definition
// (SPEC 6.2), as a pure function: same definition, method and bytes, same result.
//
// The submission is JSON with exactly one branch, deployment-method.<method>, for the
// method being run. Its applications, domain and email move to the top level; its other
// keys are method settings, merged over the baked deployment-method.<method> (itself over
// the method's defaults); deployment-method is then gone. An application the submission
// does not name keeps its baked entry; one it names without enable is off; a named
// application's settings override the baked ones key by key (typed by the baked values,
// see package settings). Everything else (another method's branch, several branches, a
// non-object, an unknown application or setting, a value of the wrong type, an unknown
// field) is refused with its JSON path named.
package merge
