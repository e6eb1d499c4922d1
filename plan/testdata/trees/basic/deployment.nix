# A test tree: builds without nixpkgs (builder.nix makes the test bed's closures).
{
  domain = "test.example";
  email = "ops@test.example";
  system = ./builder.nix;
  applications = {
    hello = {
      enable = true;
      module = ./apps/hello.nix;
      settings = {
        closure = "healthy";
        greeting = "hi";
        motd = ./files/motd.txt;
        port = 8080;
        tls = { enable = false; };
      };
    };
    mail = { enable = false; module = "apps/mail.nix"; settings = { relay = "smtp.test.example"; }; };
  };
  groups.web = {
    applications = [ "hello" "mail" ];
    nodes.web1 = {
      modules = [ "hosts/web1.nix" ];
      ssh = { host = "127.0.0.1"; port = 2201; };
      incus = { image = "switchyard-node"; limits = { cpu = 1; memory = "512MiB"; }; };
    };
    nodes.web2 = {
      modules = [ "hosts/web2.nix" ];
      ssh = { host = "127.0.0.1"; port = 2202; user = "deploy"; };
      incus = { image = "switchyard-node"; profiles = [ "default" "small" ]; };
    };
    nodes.web3 = { enable = false; ssh = { host = "127.0.0.1"; }; incus = { image = "x"; }; };
  };
  groups.db = {
    nodes.db1 = { modules = [ "hosts/db1.nix" ]; ssh = { host = "127.0.0.1"; port = 2203; }; incus = { image = "switchyard-node"; }; };
  };
  deployment-method.ssh = { parallel = 4; };
  deployment-method.tf-incus = { project = "tests"; };
}
