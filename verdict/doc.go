// Package verdict reads systemd state from a node, classifies its units and reports the verdict of SPEC 4.5.
//
// A Sampler takes one Sample in one round trip (ReadScript, a fixed shell script
// whose units come in as positional arguments, so nothing from a configuration ever
// reaches a shell): every unit's state cheaply, and the full properties of the units
// that need them; Read reads every unit in full. Classify is a pure function
// from the post-switch samples to the unit classes of SPEC 4.2, Decide turns a
// Verdict's facts into ok, the exit code and the reasons, and WriteText and
// json.Marshal render the two report forms.
//
// One rule runs through all of it: what could not be read stays "not read" (an empty
// SystemState, nil Units, nil class lists, "<not read>", JSON null), and is never
// confused with "read and empty" ("<none>", []). A severed system bus must not look
// like a node with nothing wrong.
package verdict
