import Foundation

// A change of some fields laid over the stored record, field by field,
// so that two contexts that change different attributes of a row both
// keep their change.

extension SaveTransaction {
    /// `stored` with the fields of `fields` taken from `fresh` (both
    /// records of `entity`, fields ascending; a field absent from the
    /// record it is taken from is absent from the result).
    static func overlay(_ stored: [UInt8], _ fresh: [UInt8], fields: _FieldSet, _ entity: Schema.Entity, row: Int64)
        throws -> [UInt8]
    {
        try overlayChanges(stored, fresh, fields: fields, entity, row: row).bytes
    }

    /// ``overlay(_:_:fields:_:row:)``, and the fields whose values it
    /// changes, ascending, for the history: found in the same walk over
    /// both records. Only fields of `fields` can differ. Nil and absent are
    /// alike; a field one record lacks and the other holds with its
    /// declared default (an attribute a migration added without rewriting
    /// records) did not change; fields past the entity's properties or of
    /// a property not held in the record (left by one a migration removed)
    /// are not listed.
    static func overlayChanges(
        _ stored: [UInt8], _ fresh: [UInt8], fields: _FieldSet, _ entity: Schema.Entity, row: Int64
    ) throws -> (bytes: [UInt8], changed: _FieldSet) {
        try stored.withUnsafeBytes { a in
            try fresh.withUnsafeBytes { b in
                // First the changes, and whether the result differs from
                // `fresh` at all: usually not (no other save changed the
                // fields this one keeps), and then it is `fresh`.
                var changed = _FieldSet()
                var differs = false
                var readerA = try _RecordReader(borrowing: a, entity: entity, row: row)
                var readerB = try _RecordReader(borrowing: b, entity: entity, row: row)
                var pairs = try FieldPairs(&readerA, &readerB)
                while let (field, x, y) = try pairs.next(&readerA, &readerB) {
                    if fields.contains(field) {
                        if try Self.changes(field, from: x, in: a, to: y, in: b, entity, row: row) { changed.insert(field) }
                    } else if !differs {
                        switch (x, y) {
                        case (nil, nil): break
                        case (let x?, let y?): differs = !Self.same(x, in: a, y, in: b)
                        default: differs = true
                        }
                    }
                }
                guard differs else { return (fresh, changed) }
                var writer = _RecordWriter()
                pairs = try FieldPairs(&readerA, &readerB)
                while let (field, x, y) = try pairs.next(&readerA, &readerB) {
                    guard let take = fields.contains(field) ? y : x else { continue }
                    let source = fields.contains(field) ? b : a
                    writer.appendCopy(
                        field: field, wire: take.slot.wire,
                        value: UnsafeRawBufferPointer(rebasing: source[take.valueStart..<take.slot.end]))
                }
                return (writer.bytes, changed)
            }
        }
    }

    /// `stored` with `partial` laid over it, and the fields whose values
    /// that changes, as ``overlayChanges(_:_:fields:_:row:)`` would find
    /// them with a whole record: `partial` holds only fields of `fields`
    /// (written with ``_RecordWriter/only``), and a field of `fields` it
    /// lacks is absent from the result. One walk over both records; the
    /// stored fields between two of `partial`'s are copied in one run.
    ///
    /// The result is written into `result`'s storage (emptied first), so
    /// that a caller can reuse one buffer from record to record.
    static func patch(
        _ stored: [UInt8], with partial: [UInt8], fields: _FieldSet, _ entity: Schema.Entity, row: Int64,
        into result: inout [UInt8]
    ) throws -> _FieldSet {
        try stored.withUnsafeBytes { a in
            try patch(a, with: partial, fields: fields, entity, row: row, into: &result)
        }
    }

    /// ``patch(_:with:fields:_:row:into:)`` over stored bytes the caller
    /// holds (a record read in place from its page).
    static func patch(
        _ a: UnsafeRawBufferPointer, with partial: [UInt8], fields: _FieldSet, _ entity: Schema.Entity, row: Int64,
        into result: inout [UInt8]
    ) throws -> _FieldSet {
        try partial.withUnsafeBytes { b in
            if let field = fields.onlyField, let changed = try patchOne(field, a, b, entity, row: row, into: &result) {
                return changed
            }
            result.removeAll(keepingCapacity: true)
            result.reserveCapacity(a.count + b.count)
            result.append(RecordFormat.version)
            var changed = _FieldSet()
            // Where the stored bytes not yet copied begin, and where
            // the next field of each record begins (its tag).
            var pending = 1
            var startA = 1
            var startB = 1
            var readerA = try _RecordReader(borrowing: a, entity: entity, row: row)
            var readerB = try _RecordReader(borrowing: b, entity: entity, row: row)
            var pairs = try FieldPairs(&readerA, &readerB)
            while let (field, x, y) = try pairs.next(&readerA, &readerB) {
                if y != nil || fields.contains(field) {
                    // Stored bytes up to this field are kept; its own
                    // stored value (if any) is not.
                    if startA > pending { result.append(contentsOf: UnsafeRawBufferPointer(rebasing: a[pending..<startA])) }
                    pending = x?.slot.end ?? startA
                    if let y { result.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[startB..<y.slot.end])) }
                    if try Self.changes(field, from: x, in: a, to: y, in: b, entity, row: row) { changed.insert(field) }
                }
                if let x { startA = x.slot.end }
                if let y { startB = y.slot.end }
            }
            if a.count > pending { result.append(contentsOf: UnsafeRawBufferPointer(rebasing: a[pending..<a.count])) }
            return changed
        }
    }

    /// ``patch(_:with:fields:_:row:into:)-(UnsafeRawBufferPointer,_,_,_,_,_)``
    /// for a change of one field, `field`, which `b` holds alone (the usual
    /// save of a setter): the stored fields before and after it are copied
    /// in one run each, and the stored record is the only one walked (to
    /// its end, so that damage after the field throws as in the general
    /// walk). Nil, with nothing written, when `b` is not that one field.
    private static func patchOne(
        _ field: Int, _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ entity: Schema.Entity, row: Int64,
        into result: inout [UInt8]
    ) throws -> _FieldSet? {
        var readerB = try _RecordReader(borrowing: b, entity: entity, row: row)
        var walkB = _RecordReader.FieldWalk()
        guard let y = try walkB.next(&readerB), y.field == field, y.slot.end == b.count else { return nil }
        var readerA = try _RecordReader(borrowing: a, entity: entity, row: row)
        var walkA = _RecordReader.FieldWalk()
        // The stored bytes of the field (its tag to its end), or the empty
        // run where it would go when the record lacks it.
        var start = 1
        var end = 1
        var x: FieldPairs.Field?
        var placed = false
        while let next = try walkA.next(&readerA) {
            guard !placed else { continue }
            if next.field < field {
                start = next.slot.end
                end = start
            } else {
                if next.field == field {
                    x = next
                    end = next.slot.end
                }
                placed = true
            }
        }
        result.removeAll(keepingCapacity: true)
        result.reserveCapacity(a.count + b.count)
        result.append(RecordFormat.version)
        if start > 1 { result.append(contentsOf: UnsafeRawBufferPointer(rebasing: a[1..<start])) }
        result.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[1..<b.count]))
        if a.count > end { result.append(contentsOf: UnsafeRawBufferPointer(rebasing: a[end..<a.count])) }
        var changed = _FieldSet()
        if try Self.changes(field, from: x, in: a, to: y, in: b, entity, row: row) { changed.insert(field) }
        return changed
    }

    /// Whether field `field` changes its value from `x` (in `a`) to `y` (in
    /// `b`), as ``overlayChanges(_:_:fields:_:row:)`` decides it.
    private static func changes(
        _ field: Int, from x: FieldPairs.Field?, in a: UnsafeRawBufferPointer, to y: FieldPairs.Field?,
        in b: UnsafeRawBufferPointer, _ entity: Schema.Entity, row: Int64
    ) throws -> Bool {
        let old = x.flatMap { $0.slot.wire == RecordFormat.null ? nil : $0 }
        let new = y.flatMap { $0.slot.wire == RecordFormat.null ? nil : $0 }
        guard field < entity.properties.count, entity.holdsInRecord(field) else { return false }
        switch (old, new) {
        case (nil, nil):
            return false
        case (let x?, let y?):
            return !same(x, in: a, y, in: b)
        case (let x?, nil):
            return try !isDefault(x.slot.wire, a[x.valueStart..<x.slot.end], field: field, entity, row: row)
        case (nil, let y?):
            return try !isDefault(y.slot.wire, b[y.valueStart..<y.slot.end], field: field, entity, row: row)
        }
    }

    /// True when `x` (in `a`) and `y` (in `b`) hold the same wire type
    /// and bytes.
    private static func same(
        _ x: FieldPairs.Field, in a: UnsafeRawBufferPointer, _ y: FieldPairs.Field, in b: UnsafeRawBufferPointer
    ) -> Bool {
        let count = x.slot.end - x.valueStart
        guard x.slot.wire == y.slot.wire, y.slot.end - y.valueStart == count else { return false }
        // Slices' `elementsEqual` goes byte by byte, with checks.
        return count == 0 || memcmp(a.baseAddress! + x.valueStart, b.baseAddress! + y.valueStart, count) == 0
    }

    /// The fields of two records side by side: each field number either
    /// record holds, ascending, with the field in each (nil in the one
    /// that lacks it). The readers stay with the caller (a struct holding
    /// them was copied at each step).
    struct FieldPairs {
        typealias Field = (field: Int, slot: _RecordReader.Slot, valueStart: Int)
        private var walkA = _RecordReader.FieldWalk()
        private var walkB = _RecordReader.FieldWalk()
        private var x: Field?
        private var y: Field?

        /// Pairs over the records `a` and `b` read.
        init(_ a: inout _RecordReader, _ b: inout _RecordReader) throws {
            x = try walkA.next(&a)
            y = try walkB.next(&b)
        }

        mutating func next(_ a: inout _RecordReader, _ b: inout _RecordReader) throws -> (
            field: Int, a: Field?, b: Field?
        )? {
            guard x != nil || y != nil else { return nil }
            let field = min(x?.field ?? .max, y?.field ?? .max)
            let inA = x?.field == field ? x : nil
            let inB = y?.field == field ? y : nil
            if inA != nil { x = try walkA.next(&a) }
            if inB != nil { y = try walkB.next(&b) }
            return (field, inA, inB)
        }
    }

    /// True when `wire` and `value` are the declared default's encoding of
    /// `field`, which a record written before the attribute existed lacks.
    private static func isDefault(
        _ wire: UInt8, _ value: Slice<UnsafeRawBufferPointer>, field: Int, _ entity: Schema.Entity, row: Int64
    ) throws -> Bool {
        guard let fill = try _RecordReader.defaultEncoding(of: field, entity: entity, row: row) else { return false }
        return fill.wire == wire && fill.value.elementsEqual(value)
    }

    /// Throws ``SwiftDataError/modelValidationFailure`` for a record or
    /// external value larger than a tree's value can be
    /// (`Database.maxValueLength`), before the save writes it.
    static func checkSize(_ count: Int, of what: String, _ entity: Schema.Entity, row: Int64) throws {
        guard count > Database.maxValueLength else { return }
        throw SwiftDataError(
            .modelValidationFailure,
            "\(entity.name)/p\(row): its \(what) takes \(count) bytes; a store holds at most "
                + "\(Database.maxValueLength) bytes in one")
    }
}
