// Package e2e runs cdplace on a real control plane: etcd, kube-apiserver,
// kube-controller-manager and the cdplace kube-scheduler as local processes,
// with a simulated NVL72 fleet and emulators for the NVIDIA DRA driver.
package e2e
