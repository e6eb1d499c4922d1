package definition

import "encoding/json"

func jsonNumber(s string) json.Number { return json.Number(s) }
