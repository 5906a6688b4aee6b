package realnode

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// EchoPort is the echo game server's UDP and TCP port in its container.
const EchoPort = 7777

// EchoGameServer returns a bare pod of the echo game server (image, built by hack/image
// -test-images and imported into the nodes: never pulled) with the network type and
// network-conf; it carries no container ports (the plugins add what network-conf asks for)
// and no service-account token. The echo server answers every UDP datagram and TCP line
// with "<pod name>: <what it got>".
func EchoGameServer(image, ns, name, networkType, conf string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: networkType,
			networkstatus.AnnotationNetworkConf: conf,
		}},
		Spec: EchoPodSpec(image),
	}
}

// EchoPodSpec is the pod spec of the echo game server (EchoGameServer), for pods and pod
// templates.
func EchoPodSpec(image string) corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken:  ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name: "echo", Image: image, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-port", fmt.Sprint(EchoPort)},
			Env:  []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		}},
	}
}

// Probe sends msg as one line to target (host:port) over proto ("udp" or "tcp") and returns
// the first reply (line), trimmed, waiting up to timeout. Errors are the network's: no
// answer within timeout, refused, unreachable.
func Probe(proto, target, msg string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout(proto, target, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", err
	}
	if proto == "udp" {
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(buf[:n])), nil
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}
