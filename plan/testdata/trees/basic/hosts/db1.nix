{ ... }: { networking.hostName = "db1"; }
