package containerd

import (
	"context"
	"maps"
	"strings"
	"time"

	containerd "github.com/containerd/containerd"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// List returns every container of the namespace and the deployment that
// carries sandbox.LabelManaged, and removes the containers of creations
// cut off half-way. containerd filters by the deployment's
// label unless unlabelled containers are adopted too.
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	ctx = b.nsCtx(ctx)
	filter := `labels."` + sandbox.LabelManaged + `"==true`
	if !b.dep.AdoptUnlabelled {
		filter += `,labels."` + sandbox.LabelDeployment + `"=="` + b.dep.Name + `"`
	}
	cs, err := b.cli.Containers(ctx, filter)
	if err != nil {
		return nil, engineErr("list containers", err)
	}
	b.sweepMaking(ctx)
	out := make([]sandbox.Info, 0, len(cs))
	for _, c := range cs {
		info, err := b.info(ctx, c)
		if cerrdefs.IsNotFound(err) {
			continue // removed while listing
		}
		if err != nil {
			return nil, err
		}
		if !b.dep.Owns(info.Labels) {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// Unlabelled counts the namespace's managed containers without a
// deployment label.
func (b *Backend) Unlabelled(ctx context.Context) (int, error) {
	ctx = b.nsCtx(ctx)
	cs, err := b.cli.Containers(ctx, `labels."`+sandbox.LabelManaged+`"==true`)
	if err != nil {
		return 0, engineErr("list containers", err)
	}
	n := 0
	for _, c := range cs {
		if l, err := c.Labels(ctx); err == nil && l[sandbox.LabelDeployment] == "" {
			n++
		}
	}
	return n, nil
}

// Inspect returns the sandbox id (sandboxd-<id>, or the container id of a
// container made elsewhere that carries our labels).
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	return b.info(ctx, c)
}

// load finds our container for id; anything without our label or of
// another deployment is NotFound.
func (b *Backend) load(ctx context.Context, id string) (containerd.Container, error) {
	notFound := errdefs.NotFound("sandbox %s does not exist in containerd namespace %s", id, b.ns)
	if !validID(id) {
		return nil, notFound
	}
	c, err := b.cli.LoadContainer(ctx, NamePrefix+id)
	if cerrdefs.IsNotFound(err) {
		c, err = b.cli.LoadContainer(ctx, id)
	}
	switch {
	case cerrdefs.IsNotFound(err):
		return nil, notFound
	case err != nil:
		return nil, engineErr("load sandbox "+id, err)
	}
	l, err := c.Labels(ctx)
	if cerrdefs.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, engineErr("read the labels of sandbox "+id, err)
	}
	if l[sandbox.LabelManaged] != "true" || !b.dep.Owns(l) || sandboxID(c.ID()) != id {
		return nil, notFound
	}
	return c, nil
}

// info reads the container record and its task's state.
func (b *Backend) info(ctx context.Context, c containerd.Container) (sandbox.Info, error) {
	rec, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return sandbox.Info{}, errdefs.NotFound("sandbox %s does not exist in containerd namespace %s", sandboxID(c.ID()), b.ns)
		}
		return sandbox.Info{}, engineErr("read sandbox "+sandboxID(c.ID()), err)
	}
	created, err := time.Parse(time.RFC3339Nano, rec.Labels[sandbox.LabelCreatedAt])
	if err != nil {
		created = rec.CreatedAt
	}
	state, since, err := b.state(ctx, c, rec.Labels)
	if err != nil {
		return sandbox.Info{}, err
	}
	if state == sandbox.StateRunning && since.IsZero() {
		since = created.UTC() // the first task starts at creation
	}
	return sandbox.Info{
		ID:           sandboxID(c.ID()),
		Tenant:       rec.Labels[sandbox.LabelTenant],
		Conversation: rec.Labels[sandbox.LabelConversation],
		Deployment:   rec.Labels[sandbox.LabelDeployment],
		Backend:      "containerd",
		Image:        rec.Image,
		State:        state,
		StateSince:   since,
		CreatedAt:    created.UTC(),
		Workspace:    docker.Workspace,
		Labels:       maps.Clone(rec.Labels),
	}, nil
}

// state folds the task's status into the API's states, with the time the
// sandbox entered it where the engine or a lifecycle label tells: only a
// running task takes tool calls; a paused (or pausing) one keeps everything
// until it is resumed; a container whose task was stopped for a
// hibernation (its mark, or the init's exit status for one cut short before
// the mark) is hibernated; any other without a running task (after a
// reboot, or killed) is stopped.
func (b *Backend) state(ctx context.Context, c containerd.Container, l map[string]string) (string, time.Time, error) {
	noTask := func() (string, time.Time, error) {
		if l[LabelHibernatedAt] != "" {
			return sandbox.StateHibernated, labelTime(l, LabelHibernatedAt), nil
		}
		return sandbox.StateStopped, time.Time{}, nil
	}
	t, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return noTask()
	}
	if err != nil {
		return "", time.Time{}, engineErr("find the task of sandbox "+sandboxID(c.ID()), err)
	}
	st, err := t.Status(ctx)
	if cerrdefs.IsNotFound(err) {
		return noTask()
	}
	if err != nil {
		return "", time.Time{}, engineErr("read the task status of sandbox "+sandboxID(c.ID()), err)
	}
	switch st.Status {
	case containerd.Running:
		return sandbox.StateRunning, labelTime(l, LabelRunningSince), nil
	case containerd.Paused, containerd.Pausing:
		return sandbox.StatePaused, labelTime(l, LabelPausedAt), nil
	}
	if l[LabelHibernatedAt] != "" {
		return noTask()
	}
	var exited time.Time
	if st.Status == containerd.Stopped {
		exited = st.ExitTime.UTC()
		if st.ExitStatus == sandbox.ExitHibernated {
			return sandbox.StateHibernated, exited, nil
		}
	}
	return sandbox.StateStopped, exited, nil
}

// sandboxID is the API's id of a container id.
func sandboxID(cid string) string {
	if id := strings.TrimPrefix(cid, NamePrefix); id != cid && validID(id) {
		return id
	}
	return cid
}

// validID accepts our short ids and the container ids the API may hand
// back; anything else cannot name a sandbox.
func validID(id string) bool {
	if id == "" || len(id) > 76 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
