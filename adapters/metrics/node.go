package metrics

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xce-hpc/xce/sm"
)

// View is what one scrape reads from the node, as plain data.
type View struct {
	At                  time.Time // when the scrape looked (the oldest pending job's age is taken at it)
	Name                string
	Role                sm.Role
	Term                uint64 // the term the node acts in (sm ViewTerm)
	ConfigTag           uint64 // 0: no config
	ConfigGeneration    uint64
	ConfigStale         bool
	Ready               bool
	LostAndFound        int
	Queues              []sm.QueueDepth
	WALRecords          int
	Standbys            []StandbyLag // primary only
	AckedWithoutStandby uint64
}

// StandbyLag is how many records of the primary's durable log one standby
// lacks.
type StandbyLag struct {
	Name    string
	Records uint64
}

// ViewOf reads v from n; call it on the node's event loop goroutine.
func ViewOf(n *sm.Node) View {
	opt := n.Options()
	ready, _ := n.Readiness()
	v := View{
		Name: opt.Peers[opt.Self], Role: n.Role(), Term: n.ViewTerm(),
		ConfigTag: n.ConfigTag(), ConfigGeneration: n.ConfigGeneration(), ConfigStale: n.Stale(),
		Ready: ready, LostAndFound: n.LostAndFoundCount(), Queues: n.QueueDepths(),
		WALRecords: n.WALRecordsSinceCheckpoint(), AckedWithoutStandby: n.AckedWithoutStandby(),
	}
	for _, s := range n.ReplicationStatus() {
		name := strconv.Itoa(s.Peer)
		if s.Peer >= 0 && s.Peer < len(opt.Peers) {
			name = opt.Peers[s.Peer]
		}
		v.Standbys = append(v.Standbys, StandbyLag{Name: name, Records: s.Behind})
	}
	return v
}

// roles are every value of xce_role's role label.
var roles = []sm.Role{sm.RoleBooting, sm.RoleCandidate, sm.RoleStandby, sm.RolePrimary, sm.RoleStopped}

var (
	descRole = prometheus.NewDesc("xce_role",
		"The node's HA role: 1 for the role it has, 0 for the others.", []string{"role"}, nil)
	descTerm = prometheus.NewDesc("xce_term",
		"The term the node acts in (its own as primary, else the highest it knows).", nil, nil)
	descConfig = prometheus.NewDesc("xce_config_info",
		"The running config: its version tag (hex) and generation; absent before a config is loaded.", []string{"tag", "generation"}, nil)
	descStale = prometheus.NewDesc("xce_config_stale",
		"1 when the saved config is older than --conf-stale-timeout: the node has not heard a newer one for that long (config_stale).", nil, nil)
	descReady = prometheus.NewDesc("xce_ready",
		"1 when the node serves its role, as /readyz answers 200.", nil, nil)
	descLostFound = prometheus.NewDesc("xce_lost_and_found_jobs",
		"Jobs of removed queues routed to lost_and_found by this primary's last recovery, where they wait for an operator to drain them (lost_and_found_job_count).", nil, nil)
	descQueue = prometheus.NewDesc("xce_queue_depth",
		"Jobs in each queue by state (pending, processing, dead); primary only.", []string{"queue", "state"}, nil)
	descOldest = prometheus.NewDesc("xce_queue_oldest_pending_age_seconds",
		"Seconds the queue's oldest pending job has waited to be claimed since it became claimable (enqueued, its delay or run_at reached, its retry backoff over, or redriven); 0 when no pending job is claimable; primary only.", []string{"queue"}, nil)
	descEnqueued = prometheus.NewDesc("xce_queue_jobs_enqueued_total",
		"Jobs this process enqueued into the queue as primary (submitted, in batches each job, or fired by a schedule); restarts at 0 with each process and promotion.", []string{"queue"}, nil)
	descClaimed = prometheus.NewDesc("xce_queue_jobs_claimed_total",
		"Jobs of the queue this process handed out as primary (each job of a claim batch, reclaims of lapsed claims included); restarts at 0 with each process and promotion.", []string{"queue"}, nil)
	descAcked = prometheus.NewDesc("xce_queue_jobs_acked_total",
		"Claims of the queue's jobs this process completed by an ack as primary; restarts at 0 with each process and promotion.", []string{"queue"}, nil)
	descRetried = prometheus.NewDesc("xce_queue_jobs_retried_total",
		"Claims of the queue's jobs given up by a retry that put the job back to pending, applied by this process as primary (a retry on the last attempt counts as dead); restarts at 0 with each process and promotion.", []string{"queue"}, nil)
	descDead = prometheus.NewDesc("xce_queue_jobs_dead_total",
		"Jobs of the queue this process moved to dead as primary, by every path: a fail, a retry or a lapsed claim on the last attempt, an expiry; restarts at 0 with each process and promotion.", []string{"queue"}, nil)
	descWAL = prometheus.NewDesc("xce_wal_records_since_checkpoint",
		"Records toward the next compaction: the primary's active WAL segment (a checkpoint starts at --max-wal-records), a standby's records appended since its last checkpoint began or its log was replaced, across syncs.", nil, nil)
	descLag = prometheus.NewDesc("xce_replication_lag_records",
		"Records of the primary's durable log each standby has not acknowledged; primary only.", []string{"standby"}, nil)
	descAlone = prometheus.NewDesc("xce_acked_without_standby_total",
		"Writes this process acknowledged in seed mode while no standby held them (each can be lost by a failover; status shows degraded).", nil, nil)
	descConns = prometheus.NewDesc("xce_connections",
		"Accepted connections open, by kind: client (the API's) or peer (another controller's link to us).", []string{"kind"}, nil)
	descRefused = prometheus.NewDesc("xce_connections_refused_total",
		"Connections refused by the admission limits, by reason: source, pool, rate, peer-pool (before the TLS handshake), clients, per-cn (API connections after it), and evicted (a handshake that made the least progress of a full pool, closed for a new connection); docs/operations.md, \"Threat model\".", []string{"reason"}, nil)
)

// nodeCollector reads the node's state at each scrape: view takes one
// look (on the event loop), conns counts connections (nil: not reported).
type nodeCollector struct {
	view    func() (View, error)
	conns   func() (clients, peers int)
	refused func() map[string]uint64
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRole, descTerm, descConfig, descStale, descReady, descLostFound, descQueue,
		descOldest, descEnqueued, descClaimed, descAcked, descRetried, descDead, descWAL, descLag, descAlone, descConns, descRefused} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.conns != nil {
		clients, peers := c.conns()
		ch <- gauge(descConns, float64(clients), "client")
		ch <- gauge(descConns, float64(peers), "peer")
	}
	if c.refused != nil {
		rs := c.refused()
		reasons := make([]string, 0, len(rs))
		for r := range rs {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(rs[r]), r)
		}
	}
	v, err := c.view()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRole, err)
		return
	}
	collectView(ch, v)
}

// collectView turns one View into metrics.
func collectView(ch chan<- prometheus.Metric, v View) {
	for _, r := range roles {
		ch <- gauge(descRole, b2f(v.Role == r), r.String())
	}
	ch <- gauge(descTerm, float64(v.Term))
	if v.ConfigTag != 0 {
		ch <- gauge(descConfig, 1, sm.TagHex(v.ConfigTag), strconv.FormatUint(v.ConfigGeneration, 10))
	}
	ch <- gauge(descStale, b2f(v.ConfigStale))
	ch <- gauge(descReady, b2f(v.Ready))
	ch <- gauge(descLostFound, float64(v.LostAndFound))
	for _, q := range v.Queues {
		ch <- gauge(descQueue, float64(q.Pending), q.Queue, "pending")
		ch <- gauge(descQueue, float64(q.Processing), q.Queue, "processing")
		ch <- gauge(descQueue, float64(q.Dead), q.Queue, "dead")
		ch <- gauge(descOldest, oldestAge(q, v.At), q.Queue)
		for _, c := range []struct {
			d *prometheus.Desc
			n uint64
		}{
			{descEnqueued, q.Throughput.Enqueued}, {descClaimed, q.Throughput.Claimed}, {descAcked, q.Throughput.Acked},
			{descRetried, q.Throughput.Retried}, {descDead, q.Throughput.Dead},
		} {
			ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.n), q.Queue)
		}
	}
	ch <- gauge(descWAL, float64(v.WALRecords))
	for _, s := range v.Standbys {
		ch <- gauge(descLag, float64(s.Records), s.Name)
	}
	ch <- prometheus.MustNewConstMetric(descAlone, prometheus.CounterValue, float64(v.AckedWithoutStandby))
}

// oldestAge is how long q's oldest pending job has waited at now since
// it became claimable: 0 with no pending job, or none claimable yet (its
// ready time is still ahead). Ready times are whole seconds.
func oldestAge(q sm.QueueDepth, now time.Time) float64 {
	if q.Pending == 0 {
		return 0
	}
	return max(0, now.Sub(time.Unix(q.OldestPendingAt, 0)).Seconds())
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
