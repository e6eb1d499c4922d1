{ ... }: { networking.hostName = "web1"; }
