// Names of the cluster's hosts and links, as the simulator builds them and reports their usage
// (`simulation.links[]`) and as the GUI colours them: one spelling for both.
#pragma once

#include <string>

namespace paratwin {

// GPU `local` of node `node` (nodes counted over the whole cluster), and its NVLink/NVSwitch port.
inline std::string gpu_host_name(int node, int local) {
  return "node" + std::to_string(node) + "-gpu" + std::to_string(local);
}
inline std::string gpu_link_name(int node, int local) {
  return gpu_host_name(node, local) + "-nvlink";
}

// NIC `nic` (counted over the cluster) as an endpoint of the fabric, and its link.
inline std::string nic_host_name(int nic) {
  return "nic" + std::to_string(nic);
}
inline std::string nic_link_name(int nic) {
  return nic_host_name(nic) + "-link";
}

// A fabric domain (pod, leaf or rail) whose uplink is oversubscribed, and that uplink.
inline std::string domain_name(int domain) {
  return "domain" + std::to_string(domain);
}
inline std::string uplink_name(int domain) {
  return domain_name(domain) + "-uplink";
}

}  // namespace paratwin
