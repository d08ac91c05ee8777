import StrataEngine

/// Reads records by row id with one cursor that seeks forward from the
/// previous row (`Cursor.seekForward`): the rows of an index range, or a
/// sorted row list, come in ascending order, so most lookups search one
/// leaf instead of descending from the root.
final class RecordLookup {
    private let cursor: Cursor

    init(_ cursor: Cursor) { self.cursor = cursor }

    /// Calls `body` with the record of `row` and returns its result; true
    /// (go on) when the row has no record.
    func withRecord(_ row: Int64, _ body: (Int64, UnsafeRawBufferPointer) throws -> Bool) throws -> Bool {
        // The key on the stack: a buffer held by this object cost the
        // runtime's exclusivity check (76 instructions) at each lookup.
        let key = UInt64(bitPattern: row).bigEndian
        let found = try withUnsafeBytes(of: key) { try cursor.seekForward($0) }
        guard found else { return true }
        var goOn = true
        try cursor.readValue { goOn = try body(row, $0) }
        return goOn
    }
}
