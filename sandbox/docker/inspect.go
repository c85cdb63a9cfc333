package docker

import (
	"context"
	"maps"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// List returns every container of the deployment that carries
// sandbox.LabelManaged. The engine filters by the deployment's label unless
// unlabelled containers are adopted too (label filters cannot say "absent").
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))
	if !b.dep.AdoptUnlabelled {
		f.Add("label", sandbox.LabelDeployment+"="+b.dep.Name)
	}
	// Once the deployment has pool sandboxes, the claim records are read
	// beside the containers, not after them: a listing costs one round
	// trip, not two. A record made between the two reads may be missed
	// (its sandbox then lists as unclaimed once); the records are read
	// after the containers otherwise.
	var records map[string]volume.Volume
	var recErr error
	recs := make(chan struct{})
	if b.pooled.Load() {
		go func() {
			defer close(recs)
			records, recErr = b.claims(ctx)
		}()
	} else {
		close(recs)
	}
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	<-recs
	if err != nil {
		return nil, engineErr("list containers", err)
	}
	// The expiry records, read after the containers: a record is made
	// only for a container that exists.
	expRecs, err := b.expiryRecords(ctx, "")
	if err != nil {
		return nil, err
	}
	expiries := newestExpiries(expRecs)
	if recErr != nil {
		return nil, recErr
	}
	if records == nil {
		for _, c := range cs {
			if c.Labels[sandbox.LabelPool] != "" {
				b.pooled.Store(true)
				if records, err = b.claims(ctx); err != nil {
					return nil, err
				}
				break
			}
		}
	}
	// The state records, read only when some sandbox is paused or stopped.
	var paused, hibernated map[string]string
	for _, c := range cs {
		if (c.State == "paused" || c.State == "exited" || c.State == "created") && b.dep.Owns(c.Labels) {
			if paused, err = b.records(ctx, PauseVolumePrefix); err == nil {
				hibernated, err = b.records(ctx, HibernateVolumePrefix)
			}
			if err != nil {
				return nil, err
			}
			break
		}
	}
	listed := make(map[string]bool, len(cs))
	out := make([]sandbox.Info, 0, len(cs))
	for _, c := range cs {
		if !b.dep.Owns(c.Labels) {
			continue
		}
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		if strings.HasPrefix(strings.TrimPrefix(name, "/"), MakingPrefix) {
			b.sweepMaking(ctx, c)
			continue
		}
		state := mapState(string(c.State), exitCodeOf(c.Status))
		i := info(c.ID, name, c.Image, state, time.Unix(c.Created, 0), c.Labels)
		listed[i.ID] = true
		if v, ok := records[i.ID]; ok && c.Labels[sandbox.LabelPool] != "" {
			i = info(c.ID, name, c.Image, state, time.Unix(c.Created, 0), withClaim(c.Labels, v.Labels))
		}
		out = append(out, withExpiry(withRecord(i, paused[i.ID], hibernated[i.ID]), expiries[i.ID]))
	}
	if len(records) > 0 {
		b.dropOrphanClaims(ctx, records, listed)
	}
	if len(expRecs) > 0 {
		b.dropOrphanExpiries(ctx, expRecs, listed)
	}
	return out, nil
}

// Unlabelled counts the managed containers without a deployment label.
func (b *Backend) Unlabelled(ctx context.Context) (int, error) {
	cs, err := b.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return 0, engineErr("list containers", err)
	}
	n := 0
	for _, c := range cs {
		if c.Labels[sandbox.LabelDeployment] == "" {
			n++
		}
	}
	return n, nil
}

// Inspect returns the sandbox id (sandboxd-<id>, or a container id for an
// adopted container).
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	i := infoOf(c)
	switch i.State {
	case sandbox.StatePaused:
		i = withRecord(i, b.recordOf(ctx, PauseVolumePrefix, id), "")
	case sandbox.StateStopped, sandbox.StateHibernated:
		i = withRecord(i, "", b.recordOf(ctx, HibernateVolumePrefix, id))
	}
	return withExpiry(i, b.expiryOf(ctx, i.ID)), nil
}

// inspect finds our container for id; anything without our label or of
// another deployment, or that id only matches as a prefix of someone
// else's, is NotFound.
func (b *Backend) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	notFound := errdefs.NotFound("sandbox %s does not exist in the Docker engine", id)
	if !validID(id) {
		return container.InspectResponse{}, notFound
	}
	c, err := b.cli.ContainerInspect(ctx, NamePrefix+id)
	if cerrdefs.IsNotFound(err) {
		c, err = b.cli.ContainerInspect(ctx, id)
	}
	switch {
	case cerrdefs.IsNotFound(err):
		return container.InspectResponse{}, notFound
	case err != nil:
		return container.InspectResponse{}, engineErr("inspect sandbox "+id, err)
	case c.Config == nil || c.Config.Labels[sandbox.LabelManaged] != "true" || !b.dep.Owns(c.Config.Labels) || infoOf(c).ID != id:
		return container.InspectResponse{}, notFound
	}
	if c.Config.Labels[sandbox.LabelPool] != "" {
		claim, err := b.claimOf(ctx, id)
		if err != nil {
			return container.InspectResponse{}, err
		}
		if claim != nil {
			c.Config.Labels = withClaim(c.Config.Labels, claim)
		}
	}
	return c, nil
}

func infoOf(c container.InspectResponse) sandbox.Info {
	created, _ := time.Parse(time.RFC3339Nano, c.Created)
	var img string
	var labels map[string]string
	if c.Config != nil {
		img, labels = c.Config.Image, c.Config.Labels
	}
	i := info(c.ID, c.Name, img, mapStateOf(c), created, labels)
	i.StateSince = stateSince(c)
	if c.State != nil {
		i.Started = engineTime(c.State.StartedAt)
		i.Restarting = c.State.Restarting
	}
	return i
}

// info builds an Info from what List and Inspect both know; state is the
// API's (mapState).
func info(cid, name, img, state string, engineCreated time.Time, labels map[string]string) sandbox.Info {
	id := strings.TrimPrefix(strings.TrimPrefix(name, "/"), NamePrefix)
	if !strings.HasPrefix(strings.TrimPrefix(name, "/"), NamePrefix) || !validID(id) {
		id = cid[:min(12, len(cid))] // adopted: named by someone else
	}
	// A sandbox made from a snapshot inherits its image's labels, whose
	// sandboxd keys were emptied: an empty one is as good as absent.
	for k, v := range labels {
		if v == "" && strings.HasPrefix(k, "io.sandboxd.") {
			labels = maps.Clone(labels)
			maps.DeleteFunc(labels, func(k, v string) bool { return v == "" && strings.HasPrefix(k, "io.sandboxd.") })
			break
		}
	}
	created, err := time.Parse(time.RFC3339Nano, labels[sandbox.LabelCreatedAt])
	if err != nil {
		created = engineCreated
	}
	return sandbox.Info{
		ID:           id,
		Tenant:       labels[sandbox.LabelTenant],
		Conversation: labels[sandbox.LabelConversation],
		Deployment:   labels[sandbox.LabelDeployment],
		Backend:      "docker",
		Image:        img,
		State:        state,
		CreatedAt:    created.UTC(),
		Workspace:    Workspace,
		Labels:       maps.Clone(labels),
	}
}

// mapState folds the engine's states into the API's: only "running" can take
// tool calls; "paused" keeps everything until unpaused; a container whose
// init exited with the hibernation's status is hibernated; "removing" is
// as good as gone.
func mapState(s string, exitCode int) string {
	switch s {
	case "running":
		return sandbox.StateRunning
	case "paused":
		return sandbox.StatePaused
	case "removing":
		return sandbox.StateGone
	case "exited":
		if exitCode == sandbox.ExitHibernated {
			return sandbox.StateHibernated
		}
	}
	return sandbox.StateStopped
}

// validID accepts our short ids and Docker's hex ids; anything else cannot
// name a sandbox and must not reach the engine as a name or prefix.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
