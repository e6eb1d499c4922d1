// Package settings types settings: what a value must look like to be accepted, how a
// submitted value merges over a baked one, and how a setting reads in a JSON Schema.
//
// Method settings (package method) declare their type. An application's settings are
// typed by their baked values: the JSON types of the settings baked into the deployment
// definition are the schema (Infer). A submitted key absent from the baked settings is an
// unknown setting; a submitted value of another type than the baked one is of the wrong
// type. Integers are told apart from other numbers (a baked 2 accepts 3, not 2.5; a baked
// 2.5 accepts any number) and a tree path ({"_repoPath": ...}) from other objects. A baked
// object types its keys the same way, recursively, and merges key by key; a baked null,
// empty object or empty array is untyped inside: it accepts any value of that shape
// (null: any value at all). A baked list types its elements by its first element when
// all its elements share one type; a submitted list replaces the baked one.
package settings
