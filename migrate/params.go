package migrate

import "time"

// Params bound how a migration streams. Zero fields take the defaults
// below, so that a record written before a setting existed reads as the
// default.
type Params struct {
	// DowntimeMS is the longest the guest may stand still at the
	// source's last pass (QEMU's downtime-limit): the stream goes on
	// copying until what is left fits.
	DowntimeMS int64 `json:"downtime_ms,omitempty"`
	// BandwidthMiB is the stream's limit in MiB a second.
	BandwidthMiB int64 `json:"bandwidth_mib,omitempty"`
	// MaxTimeS bounds the stream: the source cancels a stream that has
	// not completed by then, and the guest runs on there.
	MaxTimeS int64 `json:"max_time_s,omitempty"`
}

// Defaults of Params.
const (
	// DefaultDowntime is small: auto-converge slows a guest that dirties
	// memory faster than the stream copies it until the rest fits.
	DefaultDowntime = 50 * time.Millisecond
	// DefaultBandwidthMiB is well above any link of today: QEMU's own
	// default (128 MiB/s) would make busy guests converge slowly.
	DefaultBandwidthMiB = 8192
	// DefaultMaxTime bounds a stream.
	DefaultMaxTime = 2 * time.Minute
)

// Downtime returns the downtime limit.
func (p Params) Downtime() time.Duration {
	if p.DowntimeMS <= 0 {
		return DefaultDowntime
	}
	return time.Duration(p.DowntimeMS) * time.Millisecond
}

// BandwidthBytes returns the stream's limit in bytes a second.
func (p Params) BandwidthBytes() int64 {
	if p.BandwidthMiB <= 0 {
		return DefaultBandwidthMiB << 20
	}
	return p.BandwidthMiB << 20
}

// MaxTime returns the stream's bound.
func (p Params) MaxTime() time.Duration { return p.maxTime() }

func (p Params) maxTime() time.Duration {
	if p.MaxTimeS <= 0 {
		return DefaultMaxTime
	}
	return time.Duration(p.MaxTimeS) * time.Second
}
