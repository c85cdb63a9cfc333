module Fetch
  class Cache
    def initialize(dir)
      @dir = dir
      @hits = 0
    end

    def read(key)
      File.read(File.join(@dir, key))
    rescue Errno::ENOENT => missing
      puts "cache miss: #{missing.message}"
      nil
    end

    def write(key, value)
      File.write(File.join(@dir, key), value)
    rescue Errno::EACCES
      warn 'cache not writable'
    end

    def stats
      { hits: @hits, dir: @dir }
    end
  end
end
