// Package archive packs workspace directories into zip and tar archives and
// unpacks archives into them, safely, through the agent's file operations:
// it never touches a sandbox's files by a host path.
//
// Unpack treats every archive as hostile. It keeps the upload in a temporary
// file, reads the whole archive once without writing anything (names, entry
// types, the tree they make, and every byte of data, counted as it
// decompresses), and only then writes. A name that could leave the target,
// a link, a device, a duplicate, or an archive that expands too far or too
// steeply (a zip bomb) is refused before the first write.
package archive
