{ ... }: { networking.hostName = "web2"; }
