# The bundled example for the README's main job: a NixOS-shaped system toplevel
# running one service, built without nixpkgs so it works on the offline test bed
# (its switch-to-configuration is the test bed's emulation of NixOS activation).
(import ../../testbed/closures { tag = "example"; }).healthy
