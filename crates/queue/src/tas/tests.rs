//! Table tests of the TAS core beyond the ported Kueue table: a Kueue case the port cannot
//! read (nodes built in a loop), the tree, and the Beyond-Kueue options.
