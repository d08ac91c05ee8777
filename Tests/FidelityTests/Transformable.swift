import Foundation
import Strata

// `@Attribute(.transformable(by:))` as apps write it: a value type of their
// own that is not Codable, stored through a `ValueTransformer` subclass
// named by type or registered by name.

/// A color as an app keeps it: a class, not Codable.
nonisolated final class Swatch: @unchecked Sendable {
    let red: UInt8
    let green: UInt8
    let blue: UInt8

    init(red: UInt8, green: UInt8, blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }
}

/// Three bytes per swatch. It remembers the bytes it made and the bytes it
/// was given back, so tests can see that what is stored is what it made.
nonisolated final class SwatchTransformer: ValueTransformer, @unchecked Sendable {
    nonisolated(unsafe) static var made: [Data] = []
    nonisolated(unsafe) static var given: [Data] = []

    override class func transformedValueClass() -> AnyClass { NSData.self }
    override class func allowsReverseTransformation() -> Bool { true }

    override func transformedValue(_ value: Any?) -> Any? {
        guard let swatch = value as? Swatch else { return nil }
        let data = Data([0x5A, swatch.red, swatch.green, swatch.blue])
        Self.made.append(data)
        return data
    }

    override func reverseTransformedValue(_ value: Any?) -> Any? {
        guard let data = value as? Data, data.count == 4, data.first == 0x5A else { return nil }
        Self.given.append(data)
        return Swatch(red: data[data.startIndex + 1], green: data[data.startIndex + 2], blue: data[data.startIndex + 3])
    }
}

/// Tags kept as one comma-separated string, registered by name.
nonisolated final class TagListTransformer: ValueTransformer, @unchecked Sendable {
    static let name = NSValueTransformerName("TagListTransformer")

    override class func allowsReverseTransformation() -> Bool { true }

    override func transformedValue(_ value: Any?) -> Any? {
        (value as? [String]).map { Data($0.joined(separator: ",").utf8) }
    }

    override func reverseTransformedValue(_ value: Any?) -> Any? {
        (value as? Data).map { String(decoding: $0, as: UTF8.self).split(separator: ",").map(String.init) }
    }
}

@Model
final class Paint {
    var name: String
    @Attribute(.transformable(by: SwatchTransformer.self)) var swatch: Swatch
    @Attribute(.transformable(by: SwatchTransformer.self)) var accent: Swatch?
    @Attribute(.transformable(by: "TagListTransformer")) var tags: [String]?

    init(name: String, swatch: Swatch, accent: Swatch? = nil, tags: [String]? = nil) {
        self.name = name
        self.swatch = swatch
        self.accent = accent
        self.tags = tags
    }
}

/// Returns text where a transformable attribute needs Data.
nonisolated final class TextTransformer: ValueTransformer, @unchecked Sendable {
    override func transformedValue(_ value: Any?) -> Any? { "not data" }
}

@Model
final class Poster {
    var title: String
    @Attribute(.transformable(by: TextTransformer.self)) var swatch: Swatch?

    init(title: String, swatch: Swatch? = nil) {
        self.title = title
        self.swatch = swatch
    }
}

/// Stores bytes it cannot read back.
nonisolated final class OneWayTransformer: ValueTransformer, @unchecked Sendable {
    override func transformedValue(_ value: Any?) -> Any? { Data([1, 2, 3]) }
    override func reverseTransformedValue(_ value: Any?) -> Any? { 42 }
}

@Model
final class Stencil {
    var title: String
    @Attribute(.transformable(by: OneWayTransformer.self)) var swatch: Swatch

    init(title: String, swatch: Swatch) {
        self.title = title
        self.swatch = swatch
    }
}

@Model
final class Label {
    var text: String
    @Attribute(.transformable(by: "NoSuchTransformer")) var swatch: Swatch?

    init(text: String, swatch: Swatch? = nil) {
        self.text = text
        self.swatch = swatch
    }
}
