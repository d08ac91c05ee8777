import Foundation
import Strata

enum Status: String, Codable, CaseIterable {
    case planned, active, done
}

enum Priority: Int, Codable {
    case low = 1
    case high = 9
}

enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rectangle(width: Double, height: Double)
    case none
}

struct Address: Codable, Equatable {
    var street: String
    var city: String
    var geo: Geo?

    struct Geo: Codable, Equatable {
        var latitude: Double
        var longitude: Double
    }
}

/// Every attribute type the model layer stores.
@Model
final class Everything {
    var bool: Bool
    var int: Int
    var int8: Int8
    var int16: Int16
    var int32: Int32
    var int64: Int64
    var uint: UInt
    var uint8: UInt8
    var uint16: UInt16
    var uint32: UInt32
    var uint64: UInt64
    var float: Float
    var double: Double
    var decimal: Decimal
    var string: String
    var date: Date
    var data: Data
    var url: URL
    var uuid: UUID
    var status: Status
    var priority: Priority
    var shape: Shape
    var address: Address
    var tags: [String]
    var scores: [String: Int]
    var matrix: [[Double]]
    var addresses: [Address]
    var optionalInt: Int?
    var optionalString: String?
    var optionalDate: Date?
    var optionalStatus: Status?
    var optionalAddress: Address?
    var optionalTags: [String]?
    var counter = 0
    var ratio = 0.5
    var label = "none"
    var flag = false

    init(seed: Int) {
        bool = seed % 2 == 0
        int = seed &* -7919
        int8 = Int8(truncatingIfNeeded: seed)
        int16 = Int16(truncatingIfNeeded: -seed)
        int32 = Int32(truncatingIfNeeded: seed &* 31)
        int64 = Int64.min + Int64(seed)
        uint = UInt.max - UInt(seed)
        uint8 = UInt8(truncatingIfNeeded: seed)
        uint16 = UInt16(truncatingIfNeeded: seed &* 3)
        uint32 = UInt32(truncatingIfNeeded: seed &* 5)
        uint64 = UInt64.max / UInt64(seed + 1)
        float = Float(seed) / 3
        double = -Double(seed) / 7
        decimal = Decimal(string: "\(seed).0123456789")!
        string = "naïve café \(seed) 🚀"
        date = Date(timeIntervalSinceReferenceDate: Double(seed) * 86_400.25)
        data = Data((0..<(seed % 50)).map { UInt8(truncatingIfNeeded: $0 &* seed) })
        url = URL(string: "https://example.com/\(seed)?q=a%20b")!
        uuid = UUID()
        status = Status.allCases[seed % 3]
        priority = seed % 2 == 0 ? .low : .high
        shape = seed % 3 == 0 ? .circle(radius: Double(seed)) : (seed % 3 == 1 ? .rectangle(width: 1, height: 2) : .none)
        let home = Address(
            street: "\(seed) Main St", city: "Zürich", geo: seed % 2 == 0 ? nil : .init(latitude: 47.3, longitude: 8.5))
        address = home
        tags = (0..<(seed % 4)).map { "tag\($0)" }
        scores = Dictionary(uniqueKeysWithValues: (0..<(seed % 3)).map { ("k\($0)", $0 * seed) })
        matrix = [[1, 2], [], [Double(seed)]]
        addresses = [home, home]
        optionalInt = seed % 2 == 0 ? nil : seed
        optionalString = seed % 3 == 0 ? nil : ""
        optionalDate = seed % 2 == 0 ? nil : .distantPast
        optionalStatus = seed % 2 == 0 ? nil : .done
        optionalAddress = seed % 2 == 0 ? nil : home
        optionalTags = seed % 2 == 0 ? nil : []
    }
}
