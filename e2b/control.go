package e2b

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/e2b/envd"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// The control API: E2B's sandbox endpoints onto the sandbox manager.

const (
	defaultTimeout = 300 * time.Second // E2B's
	maxTimeout     = 24 * time.Hour    // E2B's longest (Pro)
	maxBody        = 1 << 20
	clientID       = "sandboxd"
	maxFork        = 100
)

type (
	networkConfig struct {
		AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
		AllowOut           []string        `json:"allowOut,omitempty"`
		DenyOut            []string        `json:"denyOut,omitempty"`
		EgressProxy        json.RawMessage `json:"egressProxy,omitempty"`
		MaskRequestHost    string          `json:"maskRequestHost,omitempty"`
		Rules              json.RawMessage `json:"rules,omitempty"`
		AllowInternet      *bool           `json:"allow_internet_access,omitempty"`
	}
	newSandbox struct {
		TemplateID      string            `json:"templateID"`
		Timeout         *int64            `json:"timeout"`
		AutoPause       *bool             `json:"autoPause"`
		AutoPauseMemory *bool             `json:"autoPauseMemory"`
		AutoResume      json.RawMessage   `json:"autoResume"`
		Secure          *bool             `json:"secure"`
		AllowInternet   *bool             `json:"allow_internet_access"`
		Network         *networkConfig    `json:"network"`
		Metadata        map[string]string `json:"metadata"`
		EnvVars         map[string]string `json:"envVars"`
		MCP             json.RawMessage   `json:"mcp"`
		IAM             json.RawMessage   `json:"iam"`
		VolumeMounts    json.RawMessage   `json:"volumeMounts"`
	}
	sandboxOut struct {
		TemplateID         string `json:"templateID"`
		SandboxID          string `json:"sandboxID"`
		Alias              string `json:"alias,omitempty"`
		ClientID           string `json:"clientID"`
		EnvdVersion        string `json:"envdVersion"`
		EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
		TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
		Domain             string `json:"domain,omitempty"`
	}
	lifecycleOut struct {
		AutoResume bool   `json:"autoResume"`
		OnTimeout  string `json:"onTimeout"`
	}
	detailOut struct {
		sandboxOut
		StartedAt     time.Time         `json:"startedAt"`
		EndAt         time.Time         `json:"endAt"`
		CPUCount      int               `json:"cpuCount"`
		MemoryMB      int               `json:"memoryMB"`
		DiskSizeMB    int               `json:"diskSizeMB"`
		Metadata      map[string]string `json:"metadata"`
		State         string            `json:"state"`
		AllowInternet *bool             `json:"allowInternetAccess,omitempty"`
		Network       *networkConfig    `json:"network,omitempty"`
		Lifecycle     *lifecycleOut     `json:"lifecycle,omitempty"`
		VolumeMounts  []struct{}        `json:"volumeMounts"`
	}
	timeoutBody struct {
		Timeout *int64 `json:"timeout"`
		Memory  *bool  `json:"memory"`
		Count   *int   `json:"count"`
		Name    string `json:"name"`
	}
	forkResult struct {
		Sandbox *sandboxOut `json:"sandbox,omitempty"`
		Error   *errorBody  `json:"error,omitempty"`
	}
	snapshotOut struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	metricOut struct {
		Timestamp     time.Time `json:"timestamp"`
		TimestampUnix int64     `json:"timestampUnix"`
		CPUCount      int       `json:"cpuCount"`
		CPUUsedPct    float64   `json:"cpuUsedPct"`
		MemUsed       uint64    `json:"memUsed"`
		MemTotal      uint64    `json:"memTotal"`
		MemCache      uint64    `json:"memCache"`
		DiskUsed      uint64    `json:"diskUsed"`
		DiskTotal     uint64    `json:"diskTotal"`
	}
)

// decode reads r's JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errdefs.InvalidArgument("the request body cannot be read: %v", err)
	}
	if len(b) > maxBody {
		return errdefs.InvalidArgument("the request body is over %d KiB; send a smaller one", maxBody>>10)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errdefs.InvalidArgument("the request body is not the JSON this call takes: %v", err)
	}
	return nil
}

// timeoutOf reads a timeout in seconds (nil: E2B's default).
func timeoutOf(v *int64) (time.Duration, error) {
	if v == nil {
		return defaultTimeout, nil
	}
	if *v < 0 || time.Duration(*v)*time.Second > maxTimeout {
		return 0, errdefs.InvalidArgument("timeout %d s is out of range; give 0 to %d seconds", *v, int64(maxTimeout/time.Second))
	}
	return time.Duration(*v) * time.Second, nil
}

func newConversation() string {
	var b [6]byte
	rand.Read(b[:])
	return "e2b-" + hex.EncodeToString(b[:])
}

// out is the Sandbox answer for info.
func (h *Handler) out(tenant string, info sandbox.Info, rec record) sandboxOut {
	tok := h.sign.token(tenant, info.ID)
	tmpl := rec.Template
	if tmpl == "" {
		tmpl = info.Image
	}
	return sandboxOut{TemplateID: tmpl, SandboxID: info.ID, ClientID: clientID, EnvdVersion: envd.Version,
		EnvdAccessToken: tok, TrafficAccessToken: tok, Domain: h.cfg.Domain}
}

// state is E2B's state of a sandboxd state ("" for one E2B has no word for).
func state(s string) string {
	switch s {
	case sandbox.StateRunning:
		return "running"
	case sandbox.StatePaused, sandbox.StateHibernated:
		return "paused"
	}
	return ""
}

func (h *Handler) detail(tenant string, info sandbox.Info) detailOut {
	rec := h.recordOf(info)
	d := detailOut{sandboxOut: h.out(tenant, info, rec), StartedAt: info.CreatedAt.UTC(), EndAt: rec.EndAt.UTC(),
		Metadata: rec.Metadata, State: state(info.State), VolumeMounts: []struct{}{}}
	if d.State == "" {
		d.State = "paused"
	}
	if rec.EndAt.IsZero() {
		d.EndAt = info.CreatedAt.UTC()
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	internet := sandbox.NetworkOf(info) != "none"
	d.AllowInternet = &internet
	onTimeout := "kill"
	if rec.AutoPause {
		onTimeout = "pause"
	}
	// Any call to a paused sandboxd sandbox resumes it.
	d.Lifecycle = &lifecycleOut{AutoResume: true, OnTimeout: onTimeout}
	return d
}

// own is the tenant's sandbox id, or E2B's 404.
func (h *Handler) own(r *http.Request, tenant string) (sandbox.Info, error) {
	id := r.PathValue("id")
	info, err := h.cfg.Sandboxes.Get(r.Context(), tenant, id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && info.Tenant != tenant) {
		return sandbox.Info{}, errdefs.NotFound("sandbox %q not found: it was killed, its timeout ended, or it is another tenant's", id)
	}
	return info, err
}

// ownWith decodes r's body into req and finds the sandbox r names, as own.
func (h *Handler) ownWith(r *http.Request, tenant string, req any) (sandbox.Info, error) {
	if err := decode(r, req); err != nil {
		return sandbox.Info{}, err
	}
	return h.own(r, tenant)
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, tenant string) error {
	var req newSandbox
	if err := decode(r, &req); err != nil {
		return err
	}
	switch {
	case len(req.MCP) > 0 && string(req.MCP) != "null":
		return errdefs.InvalidArgument("the MCP gateway is not served by sandboxd; create the sandbox without mcp")
	case len(req.IAM) > 0 && string(req.IAM) != "null":
		return errdefs.InvalidArgument("IAM tokens are not served by sandboxd; create the sandbox without iam")
	case len(req.VolumeMounts) > 0 && string(req.VolumeMounts) != "null":
		return errdefs.InvalidArgument("volumes are not served by sandboxd; create the sandbox without volumeMounts")
	}
	timeout, err := timeoutOf(req.Timeout)
	if err != nil {
		return err
	}
	f := fixed{Template: req.TemplateID, Metadata: req.Metadata,
		AutoPause: req.AutoPause != nil && *req.AutoPause, KeepMemory: req.AutoPauseMemory == nil || *req.AutoPauseMemory}
	if n := req.Network; n != nil {
		if err := checkMaskHost(n.MaskRequestHost); err != nil {
			return err
		}
		f.Public, f.MaskHost = n.AllowPublicTraffic, n.MaskRequestHost
	}
	labels, err := f.label()
	if err != nil {
		return err
	}
	cr := api.CreateSandboxRequest{Conversation: newConversation(), Env: req.EnvVars, Network: h.cfg.Network, Labels: labels, Setuid: !h.cfg.NoSudo}
	if timeout > 0 {
		cr.Expiry = sandbox.Expiry{At: time.Now().Add(timeout), Then: f.then()}
	}
	if img, ok := h.cfg.Templates[req.TemplateID]; ok {
		cr.Image = img
	} else if _, serr := h.cfg.Sandboxes.GetSnapshot(r.Context(), tenant, req.TemplateID); serr == nil {
		cr.Snapshot = req.TemplateID
	} else {
		return errdefs.NotFound("template %q not found: sandboxd does not build templates; the configured ones (e2b.templates) are %s, and a snapshot's id names one too", req.TemplateID, strings.Join(slices.Sorted(maps.Keys(h.cfg.Templates)), ", "))
	}
	if n := req.Network; n != nil {
		switch {
		case len(n.EgressProxy) > 0 && string(n.EgressProxy) != "null":
			return errdefs.InvalidArgument("network.egressProxy is not served by sandboxd; its egress goes through its own proxy (network allowOut and denyOut)")
		}
		hs, err := rulesOf(n.Rules)
		if err != nil {
			return err
		}
		if len(n.AllowOut) > 0 || len(n.DenyOut) > 0 || len(hs) > 0 {
			cr.Network = sandbox.NetworkProxy
			cr.Egress = &api.EgressRules{Allow: n.AllowOut, Deny: n.DenyOut}
			cr.EgressHeaders = hs
		}
	}
	if req.AllowInternet != nil && !*req.AllowInternet {
		if cr.Egress != nil {
			return errdefs.InvalidArgument("allow_internet_access is false but network.allowOut or denyOut are given; give one or the other")
		}
		cr.Network = "none"
	}
	release, err := h.hold(r.Context(), tenant, cr.Conversation)
	if err != nil {
		return err
	}
	defer release()
	info, err := h.cfg.Host.CreateSandbox(r.Context(), tenant, cr)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, h.out(tenant, info, h.recordOf(info)))
	return nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, tenant string) error {
	q := r.URL.Query()
	want, err := metadataFilter(q.Get("metadata"))
	if err != nil {
		return err
	}
	states := map[string]bool{}
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				if s != "running" && s != "paused" {
					return errdefs.InvalidArgument("state %q is not running or paused", s)
				}
				states[s] = true
			}
		}
	}
	limit, err := intParam(q, 100, 1, 100, "limit", "paginationLimit")
	if err != nil {
		return err
	}
	offset, err := intParam(q, 0, 0, 1<<30, "nextToken", "paginationNextToken")
	if err != nil {
		return err
	}
	after, err := timeParam(q, "startedAfter")
	if err != nil {
		return err
	}
	infos, err := h.cfg.Sandboxes.List(r.Context(), tenant, "")
	if err != nil {
		return err
	}
	var out []detailOut
	for _, info := range infos {
		st := state(info.State)
		if info.Tenant != tenant || st == "" || (len(states) > 0 && !states[st]) {
			continue
		}
		d := h.detail(tenant, info)
		if t := q.Get("template"); t != "" && d.TemplateID != t {
			continue
		}
		if !matches(d.Metadata, want) || (!after.IsZero() && d.StartedAt.Before(after)) {
			continue
		}
		d.EnvdAccessToken, d.TrafficAccessToken, d.Lifecycle, d.AllowInternet = "", "", nil, nil
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if q.Get("order") == "asc" {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].StartedAt.After(out[j].StartedAt)
	})
	if offset > len(out) {
		offset = len(out)
	}
	page := out[offset:min(offset+limit, len(out))]
	if offset+limit < len(out) {
		w.Header().Set("X-Next-Token", strconv.Itoa(offset+limit))
	}
	if page == nil {
		page = []detailOut{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// metadataFilter reads the list's metadata query: key=value pairs joined
// by &, each key and value encoded once more by the SDK.
func metadataFilter(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	pairs, err := url.ParseQuery(v)
	if err != nil {
		return nil, errdefs.InvalidArgument("metadata %q is not key=value pairs joined by &: %v", v, err)
	}
	out := map[string]string{}
	for k, vs := range pairs {
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(vs[0])
		if err1 != nil || err2 != nil {
			return nil, errdefs.InvalidArgument("metadata %q holds a badly escaped key or value", v)
		}
		out[key] = val
	}
	return out, nil
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// timeParam reads the RFC 3339 time q names (the zero time when absent),
// as the SDK sends a Date.
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errdefs.InvalidArgument("%s %q is not an RFC 3339 time; send one like 2025-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// metricsRange reads getMetrics' start and end (Unix seconds, either may be
// absent) and reports whether a sample taken at at falls within them.
func metricsRange(q url.Values) (func(at time.Time) bool, error) {
	var bounds [2]int64
	for i, name := range []string{"start", "end"} {
		v := q.Get(name)
		if v == "" {
			bounds[i] = -1
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, errdefs.InvalidArgument("%s %q is not a Unix time in seconds; send a whole number of seconds since 1970", name, v)
		}
		bounds[i] = n
	}
	return func(at time.Time) bool {
		s := at.Unix()
		return (bounds[0] < 0 || s+metricsBucket > bounds[0]) && (bounds[1] < 0 || s <= bounds[1])
	}, nil
}

// metricsBucket is the span in seconds one sample stands for. E2B
// collects every 5 s and stamps a sample with its bucket's start; sandboxd
// reads its one sample when asked and stamps it the same way, so that a
// range ending just before the read (the SDK's end is "now", in whole
// seconds, and a read takes a moment) still holds it.
const metricsBucket = 5

// bucketOf is the start of the bucket at falls in.
func bucketOf(at time.Time) time.Time { return at.Truncate(metricsBucket * time.Second) }

// templateAlias answers GET /templates/aliases/{alias} (the SDK's
// Template.exists): the templates are the operator's (e2b.templates),
// shared by every tenant, so each is public.
func (h *Handler) templateAlias(w http.ResponseWriter, r *http.Request, tenant string) error {
	alias := r.PathValue("alias")
	if _, ok := h.cfg.Templates[alias]; !ok {
		return errdefs.NotFound("template %q not found: sandboxd does not build templates; the configured ones (e2b.templates) are %s", alias, strings.Join(slices.Sorted(maps.Keys(h.cfg.Templates)), ", "))
	}
	writeJSON(w, http.StatusOK, templateAliasOut{TemplateID: alias, Public: true})
	return nil
}

// templateAliasOut is E2B's TemplateAliasResponse.
type templateAliasOut struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}

// intParam reads the first of names present in q, def when none is.
func intParam(q url.Values, def, lo, hi int, names ...string) (int, error) {
	for _, n := range names {
		if v := q.Get(n); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil || i < lo || i > hi {
				return 0, errdefs.InvalidArgument("%s %q is not a number from %d to %d", n, v, lo, hi)
			}
			return i, nil
		}
	}
	return def, nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := h.own(r, tenant)
	if err != nil {
		return err
	}
	d := h.detail(tenant, info)
	rec := h.recordOf(info)
	if rec.Public != nil || rec.MaskHost != "" {
		d.Network = &networkConfig{AllowPublicTraffic: rec.Public, MaskRequestHost: rec.MaskHost}
	}
	if sandbox.NetworkOf(info) == sandbox.NetworkProxy && h.cfg.Host != nil {
		if st, err := h.cfg.Host.Network(r.Context(), tenant, info.ID); err == nil {
			if d.Network == nil {
				d.Network = &networkConfig{}
			}
			d.Network.AllowOut, d.Network.DenyOut = st.Allow, st.Deny
		}
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, tenant string) error {
	info, err := h.own(r, tenant)
	if err != nil {
		return err
	}
	if err := h.cfg.Sandboxes.Delete(r.Context(), tenant, info.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxMaskHost caps network.maskRequestHost.
const maxMaskHost = 300

// checkMaskHost refuses a maskRequestHost that cannot be a Host header.
func checkMaskHost(m string) error {
	if m == "" {
		return nil
	}
	if len(m) > maxMaskHost || strings.ContainsAny(m, " \t\r\n/\\@") {
		return errdefs.InvalidArgument("network.maskRequestHost %.60q is not a host name (with ${PORT} for the port, as custom-host.example.com:${PORT}); give a host of at most %d characters", m, maxMaskHost)
	}
	return nil
}

// rulesOf reads E2B's network rules, {host: [{transform: {headers}}]}:
// the headers sandboxd's egress proxy adds to the sandbox's requests to
// each host. A rule with anything else is refused with a sentence.
func rulesOf(raw json.RawMessage) ([]sandbox.EgressHeader, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rules map[string][]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, errdefs.InvalidArgument("network.rules is not {host: [{transform: {headers: {name: value}}}]}: %v", err)
	}
	var out []sandbox.EgressHeader
	for _, host := range slices.Sorted(maps.Keys(rules)) {
		for _, rule := range rules[host] {
			for k, v := range rule {
				if k != "transform" {
					return nil, errdefs.InvalidArgument("network.rules[%q] has %q; sandboxd serves rules with a transform of headers only", host, k)
				}
				var t map[string]json.RawMessage
				if err := json.Unmarshal(v, &t); err != nil {
					return nil, errdefs.InvalidArgument("network.rules[%q].transform is not an object: %v", host, err)
				}
				for tk, tv := range t {
					if tk != "headers" {
						return nil, errdefs.InvalidArgument("network.rules[%q].transform has %q; sandboxd's egress proxy adds headers only", host, tk)
					}
					var hs map[string]string
					if err := json.Unmarshal(tv, &hs); err != nil {
						return nil, errdefs.InvalidArgument("network.rules[%q].transform.headers is not {name: value} of strings: %v", host, err)
					}
					for _, name := range slices.Sorted(maps.Keys(hs)) {
						out = append(out, sandbox.EgressHeader{Host: host, Name: name, Value: hs[name]})
					}
				}
			}
		}
	}
	return out, nil
}
