// Package plan turns an operator tree and a DEPLOYMENT submission into per-node plans
// (SPEC 6): for each enabled node of the picked group, its plan.json (canonical JSON,
// data only, never a credential), its generated configuration.nix, and its nixos_conf,
// the node's configuration identity.
//
// A method program runs it in these steps, each its own package or file:
//
//	def, err := definition.Load(ctx, treeDir)           // plan/definition: deployment.nix or .json
//	m, _ := method.Lookup("ssh")                        // plan/method: settings, coordinates
//	d, err := merge.Merge(def, m, deploymentBytes)      // plan/merge: SPEC 6.2; d.Hash
//	p, err := plan.Compute(d, coordinates.Environment(m.Coordinates),
//		plan.Options{StateDir: plan.DefaultStateDir(def.Tree.Root), Group: group, Nodes: nodes})
//	err = p.Write()                                     // <state>/nix/*.nix, <state>/nodes/<node>/{plan.json,configuration.nix}
//	for _, n := range p.Nodes {
//		drv, hit, err := cache.Resolve(ctx, n.NixosConf, eval(n.EvalArgv()))  // plan/evalcache; run in EvalEnv
//	}
//	names := p.Names()                                  // publishedNames
//	schema := plan.Schema(def, m)                       // JSON Schema of the method's DEPLOYMENT
//
// Every refusal of input is a *field.Error (plan/field): exit 2. A deployment.nix Nix
// cannot evaluate is a *definition.EvalError: exit 3.
package plan
