// Workgroup numbering of the element-wise and row-wise kernels: the host dispatches
// (min(groups, 65535), ceil(groups / 65535), 1) workgroups (Vulkan guarantees 65535 per dimension),
// and a workgroup's number is y * (groups in x) + x. Include after the local_size layout.

// The number of this workgroup in the flat numbering (a row, a block).
uint flat_group() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// The number of this invocation in the flat numbering (an element).
uint flat_index() { return flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; }
