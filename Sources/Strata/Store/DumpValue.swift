import Foundation
import StrataEngine

/// A field's value as `strata dump` shows it.
enum DumpValue {
    case null
    case number(String)
    case text(String)
    case bytes([UInt8])

    /// The value of `slot`, read through `reader` (which checks every
    /// payload), as the stored type says to show it.
    init(_ reader: inout _RecordReader, _ slot: _RecordReader.Slot, field: Int, property: StoredEntity.Property?) throws {
        let type = property.map { StoredEntity.baseType($0.type) }
        switch slot.wire {
        case RecordFormat.null: self = .null
        case RecordFormat.varint:
            let value = try reader.payloadVarint(slot, field: field)
            switch type {
            case "Bool": self = .number(value == 0 ? "false" : "true")
            case "Int", "Int8", "Int16", "Int32", "Int64":
                self = .number("\(Int64(bitPattern: (value >> 1) ^ (0 &- (value & 1))))")
            default: self = .number("\(value)")
            }
        case RecordFormat.fixed64:
            let double = Double(bitPattern: try reader.payloadFixed64(slot, field: field))
            if type == "Date" {
                self = .text(Date(timeIntervalSinceReferenceDate: double).formatted(.iso8601))
            } else {
                self = double.isFinite ? .number("\(double)") : .text("\(double)")
            }
        case RecordFormat.fixed32:
            let float = Float(bitPattern: try reader.payloadFixed32(slot, field: field))
            self = float.isFinite ? .number("\(float)") : .text("\(float)")
        default:
            if type == "UUID", let uuid = try? UUID._decode(slot, from: &reader, field: field) {
                self = .text(uuid.uuidString)
                return
            }
            let payload = Array(try reader.payloadBytes(slot, field: field))
            if type != "Data", let text = String(validating: payload, as: UTF8.self) {
                self = .text(text)
            } else {
                self = .bytes(payload)
            }
        }
    }

    var json: String {
        switch self {
        case .null: return "null"
        case .number(let text): return text
        case .bytes(let bytes): return DumpValue.text(Data(bytes).base64EncodedString()).json
        case .text(let text):
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                default:
                    if scalar.value < 0x20 {
                        out += String(format: "\\u%04x", scalar.value)
                    } else {
                        out.unicodeScalars.append(scalar)
                    }
                }
            }
            return out + "\""
        }
    }

    var plain: String {
        switch self {
        case .null: return "nil"
        case .number(let text): return text
        case .text: return json
        case .bytes(let bytes): return "base64:" + Data(bytes).base64EncodedString()
        }
    }
}
