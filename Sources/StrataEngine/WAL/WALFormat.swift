/// The write-ahead log: `<store>-wal`, beside the main file.
///
/// SQLite's WAL is the reference design.
///
/// WAL header (32 bytes):
/// ```
/// OFFSET SIZE DESCRIPTION
///      0    4 magic 0x5357414C ("SWAL")
///      4    4 format version: 2 (CRC-32C checksums; a log of another
///             version is ignored, as a foreign file is)
///      8    4 page size: equal to the main file's
///     12    4 generation: incremented by every WAL restart
///     16    4 salt 1: incremented by every restart
///     20    4 salt 2: random at every restart
///     24    4 CRC-32C of bytes 0..<24
///     28    4 reserved, zero
/// ```
///
/// Frame `i` starts at `32 + i × (24 + pageSize)`: a 24-byte frame header and
/// one page image.
/// ```
/// OFFSET SIZE DESCRIPTION
///      0    4 page number
///      4    4 commit frames: the store's page count after the commit;
///             other frames: 0
///      8    4 salt 1, copied from the WAL header
///     12    4 salt 2, copied from the WAL header
///     16    4 checksum: CRC-32C continued from the previous frame's checksum
///             (the header's for frame 0) over bytes 0..<16 of this header
///             and the page image's own checksum (its first 4 bytes)
///     20    4 reserved, zero
/// ```
///
/// Validity: a frame is valid if and only if its salts equal the header's,
/// its checksum equals the chained CRC over every earlier frame, and its page
/// image passes its own page checksum. (Chaining the page checksum rather
/// than the whole image gives the same guarantee with one CRC pass over the
/// page instead of two.) Recovery
/// reads frames in order while they are valid and keeps those up to and
/// including the last valid commit frame; everything after it (a transaction
/// that never committed, a torn write, garbage) is ignored and will be
/// overwritten.
///
/// Restart: once every frame has been copied into the main file (and the
/// main file synced) and no reader depends on the log, the next commit
/// writes a new header with new salts at offset 0 and syncs it *before*
/// writing any frame. Frames of the previous generation then carry stale
/// salts and can never be mistaken for current ones, even where they are
/// only partly overwritten.
enum WALFormat {
    static let magic: UInt32 = 0x5357_414C
    static let version: UInt32 = 2
    static let headerSize = 32
    static let frameHeaderSize = 24

    static func frameOffset(_ index: Int, pageSize: Int) -> Int64 {
        Int64(headerSize) + Int64(index) * Int64(frameHeaderSize + pageSize)
    }
}
