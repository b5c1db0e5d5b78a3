package nvnode

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// GPUDevices are a tray's GPUs as the driver's gpu.nvidia.com plugin publishes them (GB200), one
// owner for the simulated fleet's ResourceSlices and the DRA kubelet plugin's.
func GPUDevices(node string, n int) []resourcev1.Device {
	var gpus []resourcev1.Device
	for i := 0; i < n; i++ {
		gpus = append(gpus, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":                            str("gpu"),
				"uuid":                            str(fmt.Sprintf("GPU-%s-%d", node, i)),
				"productName":                     str("NVIDIA GB200"),
				"brand":                           str("Nvidia"),
				"architecture":                    str("Blackwell"),
				"cudaComputeCapability":           ver("10.0.0"),
				"driverVersion":                   ver("580.82.7"),
				"cudaDriverVersion":               ver("13.0.0"),
				"resource.kubernetes.io/pciBusID": str(fmt.Sprintf("0000:%02x:00.0", 0x1b+i)),
				"index":                           num(int64(i)),
				"minor":                           num(int64(i)),
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: resource.MustParse("189471Mi")},
			},
		})
	}
	return gpus
}

// ComputeDomainDevices are a node's compute-domain.nvidia.com devices: the channel, and the
// daemon unless the IMEX daemons are host-managed.
func ComputeDomainDevices(hostManaged bool) []resourcev1.Device {
	cd := []resourcev1.Device{{
		Name:       "channel-0",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("channel"), "id": num(0)},
	}}
	if !hostManaged {
		cd = append(cd, resourcev1.Device{
			Name:       "daemon-0",
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("daemon"), "id": num(0)},
		})
	}
	return cd
}

func str(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
func ver(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &s} }
func num(i int64) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{IntValue: &i} }
