package verdict

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Restart is one automatic restart of a unit as systemd recorded it in the journal.
type Restart struct {
	At      int64 // node unix seconds the restart was carried out
	Counter int   // NRestarts after it
}

// restartScheduled is the MESSAGE_ID of PID 1's "Scheduled restart job, restart
// counter is at N." (SD_MESSAGE_UNIT_RESTART_SCHEDULED), logged with N_RESTARTS=N
// when a unit's automatic restart is carried out (systemd 252 and later alike).
const restartScheduled = "5eb03494b6584870a536b337290809b3"

// maxRestartRecords bounds one history read. A loop longer than this many restarts
// is at least as long as its oldest record read, which is enough to judge a budget.
const maxRestartRecords = 2000

// RestartsArgv is the command reading unit's restart history, the newest n records
// (n is the unit's NRestarts: the current counter's records), oldest first. unit is
// one argument of the match, never shell text.
func RestartsArgv(unit string, n int) []string {
	n = min(max(n, 1), maxRestartRecords)
	return []string{"journalctl", "--no-pager", "--output=json", "--output-fields=N_RESTARTS",
		"--lines=" + strconv.Itoa(n), "MESSAGE_ID=" + restartScheduled, "_PID=1", "UNIT=" + unit}
}

// ParseRestarts parses RestartsArgv's output: one JSON object per line with
// __REALTIME_TIMESTAMP (microseconds) and N_RESTARTS. The result is oldest first and
// non-nil (a journal without records is an empty history, not an unread one).
func ParseRestarts(out []byte) ([]Restart, error) {
	hist := []Restart{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec struct {
			Realtime string `json:"__REALTIME_TIMESTAMP"`
			N        string `json:"N_RESTARTS"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("restart record %q: %w", line, err)
		}
		us, err := strconv.ParseInt(rec.Realtime, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("restart record time %q: %w", rec.Realtime, err)
		}
		n, err := strconv.Atoi(rec.N)
		if err != nil {
			return nil, fmt.Errorf("restart record counter %q: %w", rec.N, err)
		}
		hist = append(hist, Restart{At: us / 1_000_000, Counter: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("restart records: %w", err)
	}
	slices.SortStableFunc(hist, func(a, b Restart) int { return cmp.Compare(a.At, b.At) })
	return hist, nil
}
