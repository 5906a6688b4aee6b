package networkstatus

// Pod annotation and label keys, exactly as OKG defines them
// (apis/v1alpha1 GameServerNetwork*, GameServerOwnerGssKey).
const (
	// AnnotationNetworkType selects the network plugin by its exact Name, e.g.
	// "Kubernetes-HostPort".
	AnnotationNetworkType = "game.kruise.io/network-type"
	// AnnotationNetworkConf holds the plugin parameters: a JSON list of
	// {"name": ..., "value": ...} objects (see Conf).
	AnnotationNetworkConf = "game.kruise.io/network-conf"
	// AnnotationNetworkStatus holds the plugin's result: a JSON NetworkStatus.
	AnnotationNetworkStatus = "game.kruise.io/network-status"
	// AnnotationNetworkTriggerTime is stamped (RFC 3339) to make the webhook run the
	// plugin again through a pod UPDATE.
	AnnotationNetworkTriggerTime = "game.kruise.io/network-trigger-time"
	// LabelNetworkDisabled is "true" or "false" (strconv.ParseBool forms): whether the
	// pod's external network is switched off (network isolation).
	LabelNetworkDisabled = "game.kruise.io/network-disabled"
	// LabelOwnerGSS names the GameServerSet that owns the pod.
	LabelOwnerGSS = "game.kruise.io/owner-gss"
)
