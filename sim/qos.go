package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"corral/api"
)

// QOSFile is what `corral sim --qos FILE` reads: QoS classes (the fields
// of `corral qos add`) and the QoS of each of the trace's queues (field 15
// of an SWF job line).
//
//	{"qos": [{"name": "high", "priority": 100, "preempt": ["low"]},
//	         {"name": "low", "preempt_mode": "requeue"}],
//	 "queues": {"1": "high", "2": "low"}}
type QOSFile struct {
	QOS    []api.QOS         `json:"qos"`
	Queues map[string]string `json:"queues"`
}

// ReadQOS reads a QoS file into the options it sets: each queue must be a
// number and name a QoS of the file or one every cluster has (guaranteed,
// burstable, besteffort).
func ReadQOS(r io.Reader) ([]api.QOS, map[int64]string, error) {
	var f QOSFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("qos file: %w (want {\"qos\": [{\"name\": ...}], \"queues\": {\"1\": \"NAME\"}})", err)
	}
	known := map[string]bool{"guaranteed": true, "burstable": true, "besteffort": true}
	for _, q := range f.QOS {
		if q.Name == "" {
			return nil, nil, fmt.Errorf("qos file: a QoS has no name")
		}
		known[q.Name] = true
	}
	byQueue := make(map[int64]string, len(f.Queues))
	for k, name := range f.Queues {
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("qos file: queue %q is not a number (the SWF queue field is)", k)
		}
		if !known[name] {
			return nil, nil, fmt.Errorf("qos file: queue %s names QoS %q, which the file does not define", k, name)
		}
		byQueue[n] = name
	}
	return f.QOS, byQueue, nil
}
